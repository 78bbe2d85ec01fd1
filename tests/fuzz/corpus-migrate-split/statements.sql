-- head
CREATE TABLE a (x int);
/* c */ INSERT INTO a VALUES (1);
-- tail only
