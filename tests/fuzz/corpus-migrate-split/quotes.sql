SELECT 'a;''b', "c;d" -- e;f
, /* g; /* nested; */ h; */ 1;
SELECT E'x\';y', e'\\';
SELECT 2