#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_provider.h"

#define MAX_REQUESTS 4096
#define MAX_SCRIPT   64

typedef struct request {
    char *key, *payload;
    int acted;
    int refused; /* refused for good */
    char ref[FAKE_REF_SIZE];
} request;

struct fake_provider {
    pthread_mutex_t lock;
    pthread_cond_t unhung;
    int honours_keys;
    unsigned int generation; /* fake_provider_unhang() calls so far */
    unsigned int hanging;
    request requests[MAX_REQUESTS];
    unsigned int nrequests, nacts;
    enum fake_behaviour script[MAX_SCRIPT];
    unsigned int nscript;
    enum fake_status_behaviour status_script[MAX_SCRIPT];
    unsigned int nstatus_script;
    unsigned int status_requests, status_active;
    unsigned int hold, held_from; /* hold status requests until this many since held_from */
};

fake_provider *fake_provider_new(int honours_keys)
{
    fake_provider *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->unhung, NULL);
    p->honours_keys = honours_keys;
    return p;
}

void fake_provider_free(fake_provider *p)
{
    if (p == NULL)
        return;
    for (unsigned int i = 0; i < p->nrequests; i++) {
        free(p->requests[i].key);
        free(p->requests[i].payload);
    }
    pthread_cond_destroy(&p->unhung);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void fake_provider_script(fake_provider *p, enum fake_behaviour b, unsigned int count)
{
    pthread_mutex_lock(&p->lock);
    while (count-- > 0 && p->nscript < MAX_SCRIPT)
        p->script[p->nscript++] = b;
    pthread_mutex_unlock(&p->lock);
}

/* The next scripted behaviour (locked). */
static enum fake_behaviour next_behaviour(fake_provider *p)
{
    enum fake_behaviour b;

    if (p->nscript == 0)
        return FAKE_OK;
    b = p->script[0];
    memmove(p->script, p->script + 1, (p->nscript - 1) * sizeof(p->script[0]));
    p->nscript--;
    return b;
}

/* The first act for @key, if the provider honours keys (locked). */
static const request *earlier_act(const fake_provider *p, const char *key)
{
    for (unsigned int i = 0; p->honours_keys && i < p->nrequests; i++) {
        if (p->requests[i].acted && strcmp(p->requests[i].key, key) == 0)
            return &p->requests[i];
    }
    return NULL;
}

/* Record the request and act on it, unless an earlier act for its key stands (locked). */
static void act(fake_provider *p, request *r)
{
    const request *before = earlier_act(p, r->key);

    if (before != NULL) {
        memcpy(r->ref, before->ref, sizeof(r->ref));
        return;
    }
    r->acted = 1;
    snprintf(r->ref, sizeof(r->ref), "msg-%u", ++p->nacts);
}

int fake_provider_send(fake_provider *p, const char *downstream_key, const char *payload,
                       char ref[FAKE_REF_SIZE])
{
    enum fake_behaviour b;
    request *r;
    unsigned int generation;
    int result = FAKE_SENT;

    pthread_mutex_lock(&p->lock);
    b = next_behaviour(p);
    if (b == FAKE_HANG) {
        generation = p->generation;
        p->hanging++;
        while (p->generation == generation)
            pthread_cond_wait(&p->unhung, &p->lock);
        p->hanging--;
    }
    if (p->nrequests == MAX_REQUESTS) {
        pthread_mutex_unlock(&p->lock);
        return FAKE_FAILED;
    }
    if (b == FAKE_LOSE_REQUEST) {
        pthread_mutex_unlock(&p->lock);
        return FAKE_TIMEOUT;
    }
    r = &p->requests[p->nrequests++];
    r->key = strdup(downstream_key != NULL ? downstream_key : "");
    r->payload = strdup(payload != NULL ? payload : "");
    if (b == FAKE_FAIL)
        result = FAKE_FAILED;
    else if (b == FAKE_REFUSE_LOSE_REPLY)
        r->refused = 1;
    else
        act(p, r);
    if (b == FAKE_LOSE_REPLY || b == FAKE_REFUSE_LOSE_REPLY)
        result = FAKE_TIMEOUT;
    if (result == FAKE_SENT)
        memcpy(ref, r->ref, FAKE_REF_SIZE);
    pthread_mutex_unlock(&p->lock);
    return result;
}

void fake_provider_unhang(fake_provider *p)
{
    pthread_mutex_lock(&p->lock);
    p->generation++;
    p->hold = 0;
    pthread_cond_broadcast(&p->unhung);
    pthread_mutex_unlock(&p->lock);
}

unsigned int fake_provider_hanging(fake_provider *p)
{
    unsigned int n;

    pthread_mutex_lock(&p->lock);
    n = p->hanging;
    pthread_mutex_unlock(&p->lock);
    return n;
}

unsigned int fake_provider_requests(fake_provider *p)
{
    unsigned int n;

    pthread_mutex_lock(&p->lock);
    n = p->nrequests;
    pthread_mutex_unlock(&p->lock);
    return n;
}

unsigned int fake_provider_acts(fake_provider *p)
{
    unsigned int n;

    pthread_mutex_lock(&p->lock);
    n = p->nacts;
    pthread_mutex_unlock(&p->lock);
    return n;
}

unsigned int fake_provider_acts_for(fake_provider *p, const char *downstream_key)
{
    unsigned int n = 0;

    pthread_mutex_lock(&p->lock);
    for (unsigned int i = 0; i < p->nrequests; i++)
        n += p->requests[i].acted && strcmp(p->requests[i].key, downstream_key) == 0;
    pthread_mutex_unlock(&p->lock);
    return n;
}

const char *fake_provider_key_of(fake_provider *p, unsigned int i)
{
    const char *key = NULL;

    pthread_mutex_lock(&p->lock);
    if (i < p->nrequests)
        key = p->requests[i].key;
    pthread_mutex_unlock(&p->lock);
    return key;
}

void fake_provider_script_status(fake_provider *p, enum fake_status_behaviour b, unsigned int count)
{
    pthread_mutex_lock(&p->lock);
    while (count-- > 0 && p->nstatus_script < MAX_SCRIPT)
        p->status_script[p->nstatus_script++] = b;
    pthread_mutex_unlock(&p->lock);
}

void fake_provider_hold_status(fake_provider *p, unsigned int n)
{
    pthread_mutex_lock(&p->lock);
    p->hold = n;
    p->held_from = p->status_requests;
    pthread_mutex_unlock(&p->lock);
}

/* The next scripted status behaviour (locked). */
static enum fake_status_behaviour next_status_behaviour(fake_provider *p)
{
    enum fake_status_behaviour b;

    if (p->nstatus_script == 0)
        return FAKE_STATUS_OK;
    b = p->status_script[0];
    memmove(p->status_script, p->status_script + 1,
            (p->nstatus_script - 1) * sizeof(p->status_script[0]));
    p->nstatus_script--;
    return b;
}

/* Wait while the request must be held, or hang until unhung (locked). */
static void wait_status(fake_provider *p, enum fake_status_behaviour b)
{
    unsigned int generation = p->generation;

    pthread_cond_broadcast(&p->unhung); /* one more has arrived */
    while (p->hold > 0 && p->status_requests - p->held_from < p->hold)
        pthread_cond_wait(&p->unhung, &p->lock);
    if (b != FAKE_STATUS_HANG)
        return;
    p->hanging++;
    while (p->generation == generation)
        pthread_cond_wait(&p->unhung, &p->lock);
    p->hanging--;
}

/* What was recorded under @key (locked). */
static int recorded_status(const fake_provider *p, const char *key, char ref[FAKE_REF_SIZE],
                           char body[FAKE_BODY_SIZE])
{
    for (unsigned int i = 0; i < p->nrequests; i++) {
        const request *r = &p->requests[i];

        if (strcmp(r->key, key) != 0)
            continue;
        if (r->acted) {
            snprintf(ref, FAKE_REF_SIZE, "%s", r->ref);
            snprintf(body, FAKE_BODY_SIZE, "{\"status\": \"sent\", \"message_id\": \"%s\"}",
                     r->ref);
            return FAKE_STATUS_SENT;
        }
        if (r->refused) {
            snprintf(body, FAKE_BODY_SIZE, "{\"error\": \"mailbox unavailable\"}");
            return FAKE_STATUS_REFUSED;
        }
    }
    return FAKE_STATUS_NOT_FOUND;
}

int fake_provider_status(fake_provider *p, const char *downstream_key, char ref[FAKE_REF_SIZE],
                         char body[FAKE_BODY_SIZE])
{
    enum fake_status_behaviour b;
    int result;

    ref[0] = body[0] = '\0';
    pthread_mutex_lock(&p->lock);
    b = next_status_behaviour(p);
    p->status_requests++;
    p->status_active++;
    wait_status(p, b);
    if (b == FAKE_STATUS_ERROR) {
        result = FAKE_STATUS_FAILED;
    } else if (b == FAKE_STATUS_GARBAGE) {
        snprintf(body, FAKE_BODY_SIZE, "{\"status\": \"sent\", \"message_id\":");
        result = FAKE_STATUS_MANGLED;
    } else {
        result = recorded_status(p, downstream_key, ref, body);
    }
    p->status_active--;
    pthread_cond_broadcast(&p->unhung);
    pthread_mutex_unlock(&p->lock);
    return result;
}

unsigned int fake_provider_status_requests(fake_provider *p)
{
    unsigned int n;

    pthread_mutex_lock(&p->lock);
    n = p->status_requests;
    pthread_mutex_unlock(&p->lock);
    return n;
}

unsigned int fake_provider_status_active(fake_provider *p)
{
    unsigned int n;

    pthread_mutex_lock(&p->lock);
    n = p->status_active;
    pthread_mutex_unlock(&p->lock);
    return n;
}
