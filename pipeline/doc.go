// Package pipeline is the one path from a site's fitted models to its
// published results, which crffd fit, the site daemon's scoring of new
// rows and a federated site's runs all take.
//
// A run's models and the estimator model selection chose are a Fitted
// (Select fits and chooses them for a site alone; a federated run's are
// the federation's, of which KeptModels tells which a site keeps).
// Fitted.CATE scores rows with them. NewScores gives rows their AIPW
// scores from the models' nuisance predictions, Analyse a site's AIPW
// ATE, and Rows pairs the rows with their effects, their calibrated
// CATEs and their scores, as crff_cate holds them. Publish saves a Run's
// models in the site file, so that rows added later are scored with
// exactly the trained models, and writes its results (crff_cate,
// crff_ate, model selection, transfer factors), replacing the current
// run's in one transaction. Nothing here reads the configuration, opens
// a plugin or talks to other sites: kernels come open, as
// estimator.Spectral values.
package pipeline
