INSERT OR REPLACE INTO notes (id, owner, sort_key, title, body) VALUES
  ('n-1', 'alice', '0001#n-1', 'Groceries', 'Coffee, bread.'),
  ('n-2', 'alice', '0002#n-2', 'Ideas', 'A host for private inventories.'),
  ('n-3', 'bob',   '0001#n-3', 'Bob''s note', 'Only bob sees this.');
