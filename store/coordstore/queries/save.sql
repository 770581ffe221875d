INSERT INTO crff_coordinator_state (id, run, step, state, saved_at)
VALUES (1, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (id) DO UPDATE SET run = excluded.run, step = excluded.step,
    state = excluded.state, saved_at = excluded.saved_at;
