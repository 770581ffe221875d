package store

import (
	"fmt"
	"strings"
)

// OutcomeType says how the outcome column is modelled.
type OutcomeType string

// Outcome types. The empty OutcomeType means OutcomeAuto.
const (
	OutcomeAuto       OutcomeType = "auto"       // binary when every outcome is 0 or 1, else continuous
	OutcomeContinuous OutcomeType = "continuous" // real-valued, Gaussian
	OutcomeBinary     OutcomeType = "binary"     // 0 or 1, Bernoulli; any other value is an error
)

// OnInvalid says what to do with rows that fail validation.
type OnInvalid string

// Policies for invalid rows. The empty OnInvalid means Refuse.
const (
	// Refuse stops with an error naming the first offending rows.
	Refuse OnInvalid = "refuse"
	// Skip leaves the offending rows out, lists them in crff_rejected, and
	// goes on with the others.
	Skip OnInvalid = "skip"
)

// Source is the configuration of a site's records: where they are and what
// each column means. It decodes from a configuration file with viper
// (mapstructure keys, snake_case) or YAML:
//
//	db: hospital-a.sqlite
//	table: records
//	id_column: patient_id
//	treatment_column: treated
//	outcome_column: recovery_days
//	covariates: [age, weight, smoker]   # omit: every other numeric column
//	binary: [smoker]                    # omit: detected from the values
//	outcome_type: continuous            # continuous, binary or auto (default)
//	identity_columns: [name, birth_date]
//	on_invalid: skip                    # refuse (default) or skip
//
// Column names match the table's case-insensitively, as SQLite's do.
//
// When Covariates is empty, the covariates are the other columns of the
// table or view (not the id, treatment, outcome or identity columns) that
// hold numbers, by this rule: a column is a covariate when it is declared
// with an INTEGER or REAL affinity (a type name containing INT, REAL, FLOA
// or DOUB), or when at least one of its values is a number: stored as an
// integer or a real, or a text that crffd import would have read as a
// number (a decimal integer or real, with an optional sign and spaces
// around it, or inf; not a code with a leading zero such as 007). Every
// value of a covariate must then be a finite number: a column that is
// mostly numbers with a few texts such as "n/a" (as `crffd import` stores
// as TEXT) is a covariate with bad values, refused or skipped by
// OnInvalid, never dropped. The other columns, which hold no number at all
// (names, codes, dates as text, or only NULLs), are left out and listed
// with the reason in [Records.Unused], for the caller to report. The
// resolved list is in [Layout.Covariates]; list covariates explicitly to
// make the model independent of later changes to the table.
//
// A text that spells a number counts as that number wherever a number is
// read (covariates, treatment, outcome), so a column stored as TEXT is read
// by its values, and only the values that are not numbers are at fault.
//
// A covariate named in Binary is Bernoulli, and each of its values must be 0
// or 1; one named in Continuous is Gaussian. Any other covariate is binary
// when every value of it that is read is 0 or 1, and continuous otherwise.
type Source struct {
	DB              string      `mapstructure:"db" yaml:"db"`
	Table           string      `mapstructure:"table" yaml:"table"`
	IDColumn        string      `mapstructure:"id_column" yaml:"id_column"`
	TreatmentColumn string      `mapstructure:"treatment_column" yaml:"treatment_column"`
	OutcomeColumn   string      `mapstructure:"outcome_column" yaml:"outcome_column"`
	Covariates      []string    `mapstructure:"covariates" yaml:"covariates,omitempty"`
	Binary          []string    `mapstructure:"binary" yaml:"binary,omitempty"`
	Continuous      []string    `mapstructure:"continuous" yaml:"continuous,omitempty"`
	OutcomeType     OutcomeType `mapstructure:"outcome_type" yaml:"outcome_type,omitempty"`
	IdentityColumns []string    `mapstructure:"identity_columns" yaml:"identity_columns,omitempty"`
	OnInvalid       OnInvalid   `mapstructure:"on_invalid" yaml:"on_invalid,omitempty"`
}

// Validate checks the configuration on its own, without opening the file:
// required settings are present, enumerations hold a known value, and no
// column is given two roles. It returns a *[ConfigError] (wrapping
// ErrConfig) for the first fault. Whether the columns exist is checked when
// records are read.
func (s Source) Validate() error {
	for _, r := range []struct{ key, val string }{
		{"db", s.DB},
		{"table", s.Table},
		{"id_column", s.IDColumn},
		{"treatment_column", s.TreatmentColumn},
		{"outcome_column", s.OutcomeColumn},
	} {
		if strings.TrimSpace(r.val) == "" {
			return &ConfigError{Key: r.key, Reason: "required"}
		}
		if err := checkName(r.val); err != nil {
			return &ConfigError{Key: r.key, Reason: err.Error()}
		}
	}
	if strings.HasPrefix(strings.ToLower(s.Table), "crff_") {
		return &ConfigError{Key: "table", Reason: fmt.Sprintf("%q is one of crffd's own objects (crff_ prefix)", s.Table)}
	}
	switch s.OutcomeType {
	case "", OutcomeAuto, OutcomeContinuous, OutcomeBinary:
	default:
		return &ConfigError{Key: "outcome_type", Reason: fmt.Sprintf("%q: must be continuous, binary or auto", s.OutcomeType)}
	}
	switch s.OnInvalid {
	case "", Refuse, Skip:
	default:
		return &ConfigError{Key: "on_invalid", Reason: fmt.Sprintf("%q: must be refuse or skip", s.OnInvalid)}
	}

	// Each column has one role: id, treatment, outcome or covariate.
	roles := map[string]string{}
	for _, r := range []struct{ key, col string }{
		{"id_column", s.IDColumn},
		{"treatment_column", s.TreatmentColumn},
		{"outcome_column", s.OutcomeColumn},
	} {
		k := strings.ToLower(r.col)
		if prev, ok := roles[k]; ok {
			return &ConfigError{Key: r.key, Reason: fmt.Sprintf("column %q is already the %s", r.col, prev)}
		}
		roles[k] = r.key
	}
	covs := map[string]bool{}
	for _, c := range s.Covariates {
		if err := checkName(c); err != nil {
			return &ConfigError{Key: "covariates", Reason: err.Error()}
		}
		k := strings.ToLower(c)
		if prev, ok := roles[k]; ok {
			return &ConfigError{Key: "covariates", Reason: fmt.Sprintf("column %q is the %s", c, prev)}
		}
		if covs[k] {
			return &ConfigError{Key: "covariates", Reason: fmt.Sprintf("column %q is listed twice", c)}
		}
		covs[k] = true
	}
	typed := map[string]string{}
	for _, l := range []struct {
		key  string
		cols []string
	}{{"binary", s.Binary}, {"continuous", s.Continuous}} {
		for _, c := range l.cols {
			if err := checkName(c); err != nil {
				return &ConfigError{Key: l.key, Reason: err.Error()}
			}
			k := strings.ToLower(c)
			if prev, ok := typed[k]; ok {
				if prev == l.key {
					return &ConfigError{Key: l.key, Reason: fmt.Sprintf("column %q is listed twice", c)}
				}
				return &ConfigError{Key: l.key, Reason: fmt.Sprintf("column %q is also listed as %s", c, prev)}
			}
			typed[k] = l.key
			if prev, ok := roles[k]; ok {
				return &ConfigError{Key: l.key, Reason: fmt.Sprintf("column %q is the %s, not a covariate", c, prev)}
			}
			if len(s.Covariates) > 0 && !covs[k] {
				return &ConfigError{Key: l.key, Reason: fmt.Sprintf("column %q is not in covariates", c)}
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range s.IdentityColumns {
		if err := checkName(c); err != nil {
			return &ConfigError{Key: "identity_columns", Reason: err.Error()}
		}
		k := strings.ToLower(c)
		if seen[k] {
			return &ConfigError{Key: "identity_columns", Reason: fmt.Sprintf("column %q is listed twice", c)}
		}
		seen[k] = true
	}
	return nil
}

// outcomeType returns s.OutcomeType with the default filled in.
func (s Source) outcomeType() OutcomeType {
	if s.OutcomeType == "" {
		return OutcomeAuto
	}
	return s.OutcomeType
}

// checkName reports a column or table name SQLite cannot hold.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	if strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("name %q contains a NUL byte", name)
	}
	return nil
}
