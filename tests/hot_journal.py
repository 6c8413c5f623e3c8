#!/usr/bin/python3
"""hot_journal.py DB - leave DB with a hot rollback journal, as a writer killed mid-transaction
(extract under kill -9) does: a transaction that spilled pages into the file, then an exit with
neither commit nor rollback. test_extract.sh (sae-train, a writer, rolls it back) and
test_query.sh (query, a reader, says a writer must) share it."""
import os
import sqlite3
import sys

c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=DELETE")
c.execute("BEGIN IMMEDIATE")
c.execute("CREATE TABLE zz(a)")
c.execute("PRAGMA cache_size=10")  # spill to the file, so the journal is needed
c.execute("INSERT INTO zz WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 60) "
          "SELECT randomblob(100000) FROM r")
os._exit(0)  # no commit, no rollback: the -journal stays hot
