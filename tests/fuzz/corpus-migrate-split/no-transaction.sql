-- 0003: an index
  -- idem:no-transaction  

CREATE INDEX CONCURRENTLY IF NOT EXISTS i ON t (x);
