package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// federated reports whether the configuration makes this site part of a
// federation.
func federated(a *app) bool { return false }

// runFederatedSite takes part in the federation's runs.
func runFederatedSite(cmd *cobra.Command, a *app, once bool) error {
	return errors.New("federated site: not built yet")
}
