-- The documents example's schema. `order_key` is each record's unique,
-- immutable ordering key (timestamp, then the id as tie-breaker): printable
-- ASCII without spaces, compared bytewise by SQLite's default BINARY
-- collation, which is the JavaScript string order the seed asks for.
CREATE TABLE IF NOT EXISTS documents (
    id        TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    order_key TEXT NOT NULL UNIQUE,
    title     TEXT NOT NULL,
    body      TEXT NOT NULL,
    deleted   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS documents_by_owner ON documents (owner, order_key);
