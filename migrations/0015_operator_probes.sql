-- 0015: the operators' tools record the answers they ask providers for.
--
-- idem-reconcile probe and idem-sweep --config run an http tool's resolver (a status
-- request) about an outcome_unknown operation and record the answer with
-- idem_external_probe(), as a member of idem_operator (idem-sweep --config: of idem_sweeper
-- and idem_operator). The statement that records it reads and updates the record, its
-- outbox row and its open item, which the operator may since 0007, and inserts the
-- answer's row into idem.external_probes, which it could not: both tools stopped with exit
-- 77 unless their role also held idem_app. The operator may now insert that row, under the
-- policy tenant_isolation alone: the row's tenant must be the tenant the library sets for
-- the question's transaction. It still deletes nothing, and inserts nothing else but the
-- resolved stalled_pending item of 0010.
--
-- Only a grant: it creates nothing, locks nothing in use, and running it again changes
-- nothing. None of the statements the library runs as idem_app needs it.

GRANT INSERT ON idem.external_probes TO idem_operator;
