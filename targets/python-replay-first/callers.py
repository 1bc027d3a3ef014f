"""The callers of python-replay-first's own-callers mode: API keys in a
SQLite table in CHAOS_STATE_DIR, the way a service keeps its users, rather
than a token asked about at an authority.

chaos tells this table who may call, and when that changes, through the
commands of own-callers.target.toml's [authority]:

    python3 callers.py grant TOKEN ACTOR TENANT "SCOPE WORDS"
    python3 callers.py set TOKEN ACTIVE "SCOPE WORDS"     # a revocation

Each command commits before it exits, and chaos waits for it: the target
reads the new grant on its very next lookup, as it would after an admin's
UPDATE of a users table.
"""

import os
import sqlite3
import sys

DATABASE = os.path.join(os.environ.get("CHAOS_STATE_DIR", "."), "callers.db")


def connect():
    # A short busy timeout: the target reads while a command writes.
    connection = sqlite3.connect(DATABASE, timeout=5)
    connection.execute(
        "CREATE TABLE IF NOT EXISTS callers ("
        " token TEXT PRIMARY KEY, actor TEXT NOT NULL, tenant TEXT NOT NULL,"
        " scope TEXT NOT NULL, active INTEGER NOT NULL)"
    )
    return connection


def grant_of(token):
    """The grant in RFC 7662's shape, {"active": False} for an unknown key."""
    with connect() as connection:
        row = connection.execute(
            "SELECT actor, tenant, scope, active FROM callers WHERE token = ?", (token,)
        ).fetchone()
    if row is None or not row[3]:
        return {"active": False}
    return {"active": True, "sub": row[0], "tenant": row[1], "scope": row[2]}


def main(argv):
    if len(argv) == 5 and argv[0] == "grant":
        token, actor, tenant, scope = argv[1:]
        with connect() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO callers VALUES (?, ?, ?, ?, 1)",
                (token, actor, tenant, scope),
            )
        return 0
    if len(argv) == 4 and argv[0] == "set":
        token, active, scope = argv[1:]
        with connect() as connection:
            changed = connection.execute(
                "UPDATE callers SET active = ?, scope = ? WHERE token = ?",
                (1 if active == "true" else 0, scope, token),
            ).rowcount
        if changed != 1:
            print(f"callers.py: no caller with token {token}", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
