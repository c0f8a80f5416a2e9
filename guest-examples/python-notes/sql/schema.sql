CREATE TABLE IF NOT EXISTS notes (
    id       TEXT PRIMARY KEY,
    owner    TEXT NOT NULL,
    sort_key TEXT NOT NULL UNIQUE,
    title    TEXT NOT NULL,
    body     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS notes_by_owner ON notes (owner, sort_key);
