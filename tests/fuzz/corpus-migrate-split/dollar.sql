CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$
BEGIN
  PERFORM 1; RETURN $$;$$;
END;
$body$;
SELECT $1, a$b, $x;
