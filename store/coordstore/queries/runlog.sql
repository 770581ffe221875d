INSERT INTO crff_coordinator_run_log (run, status, reason, ended_at)
VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (run) DO UPDATE SET status = excluded.status, reason = excluded.reason, ended_at = excluded.ended_at;
