package federation

// selectionReleases returns the noised releases of model selection's
// statistics at a private site (see releases).
func (s *site) selectionReleases() []release { return nil }
