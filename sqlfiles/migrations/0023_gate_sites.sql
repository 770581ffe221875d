-- 0023_gate_sites: federated subgroups (issue 34). A global row of
-- crff_gate is a subgroup the coordinator named (coordinator.subgroups):
-- its AIPW effect over the rows of the sites that evaluated it, by their
-- policy (site.subgroups), each site's rows a stratum of the stratified
-- variance; sites lists them as a JSON array of names. A global subgroup
-- no site evaluated has NULL figures, NULL sites and a reason.
ALTER TABLE crff_gate ADD COLUMN sites TEXT;
