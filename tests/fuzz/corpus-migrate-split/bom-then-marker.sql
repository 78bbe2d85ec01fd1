-- idem:no-transaction
SELECT 1;
