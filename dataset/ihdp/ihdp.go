// Package ihdp embeds the ten replicates of the IHDP benchmark (Hill 2011,
// as published with CEVAE), so that crffd eval --data ihdp needs no
// download. README.md in this folder holds the provenance and licence
// note.
package ihdp

import "embed"

// Name is the --data shorthand of the embedded replicates.
const Name = "ihdp"

// Files holds ihdp_npci_1.csv … ihdp_npci_10.csv at its root.
//
//go:embed ihdp_npci_*.csv
var Files embed.FS
