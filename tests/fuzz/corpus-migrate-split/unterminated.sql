SELECT 'open;
SELECT (1;
/* open comment ; 