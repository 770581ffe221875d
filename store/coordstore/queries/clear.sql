DELETE FROM crff_coordinator_state;
