SELECT 1;
-- idem:no-transaction
/* -- idem:no-transaction */
