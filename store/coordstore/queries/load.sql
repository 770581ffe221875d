SELECT state FROM crff_coordinator_state WHERE id = 1;
