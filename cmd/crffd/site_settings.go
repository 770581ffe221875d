package main

import (
	"context"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/store"
)

// openSpectral opens the kernel plugin a setup names; the plugin is killed
// when ctx's command ends (plugins are managed).
func (a *app) openSpectral(ctx context.Context, k modelstore.Kernel) (estimator.Spectral, error) {
	dir, err := a.pluginDir()
	if err != nil {
		return nil, err
	}
	c, err := a.openKernelCtx(ctx, dir, k.Name, k.Params)
	if err != nil {
		return nil, err // not c: a nil *Client would be a non-nil Spectral
	}
	return c, nil
}

// openSite opens the configured site file with the configured busy timeout.
// The caller closes it. A busy timeout that is not a duration is a
// configuration error (exitConfig), which a caller's withExit keeps.
func (a *app) openSite(ctx context.Context, src store.Source) (*store.Site, error) {
	return a.openSiteRows(ctx, src, false)
}

// openSiteRows is openSite, with the covariates of large reads mapped
// rather than in the heap when mapRows is set (store.Options.MapRows): for
// commands that read the rows once and end.
func (a *app) openSiteRows(ctx context.Context, src store.Source, mapRows bool) (*store.Site, error) {
	timeout, err := a.conf().PositiveDuration("site.busy_timeout")
	if err != nil {
		return nil, withExit(exitConfig, err)
	}
	// Subgroups' small cells are those a federated run refuses.
	minArm := a.conf().V.GetInt("federation.min_arm_rows")
	return store.Open(ctx, src.DB, store.Options{BusyTimeout: timeout, Logger: a.log, MinArmRows: minArm, MapRows: mapRows})
}

// openRecords opens the site file of src and reads its records, as fit,
// check and privacy audit do, the covariates of a large site mapped (they
// are read once and kept until the command ends). The caller closes the
// file.
func (a *app) openRecords(ctx context.Context, src store.Source) (*store.Site, *store.Records, error) {
	db, err := a.openSiteRows(ctx, src, true)
	if err != nil {
		return nil, nil, err
	}
	recs, err := db.ReadRecords(ctx, src)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, recs, nil
}
