-- Demo data: a few documents each for alice and bob.
INSERT OR REPLACE INTO documents (id, owner, order_key, title, body) VALUES
  ('a-001', 'alice', '2026-01-05T09:00:00Z#a-001', 'Quarterly plan', 'Ship the inventory host by Q2.'),
  ('a-002', 'alice', '2026-02-11T14:30:00Z#a-002', 'Reading list', 'RFC 6570, RFC 9728, RFC 8707.'),
  ('a-003', 'alice', '2026-03-02T08:15:00Z#a-003', 'Meeting notes', 'Cursor binding: client, subject, scopes, audience.'),
  ('a-004', 'alice', '2026-03-02T08:15:00Z#a-004', 'Same-minute note', 'The id breaks the tie in the ordering key.'),
  ('b-001', 'bob',   '2026-01-20T11:00:00Z#b-001', 'Bob''s budget', 'Private to bob.'),
  ('b-002', 'bob',   '2026-04-01T16:45:00Z#b-002', 'Travel', 'Lisbon in May.');
