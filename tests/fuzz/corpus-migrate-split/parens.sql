CREATE TABLE t (a int CHECK (a > 0); b text);
;;
; SELECT ((1));