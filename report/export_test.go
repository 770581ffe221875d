package report

// ImbalancedBalance is imbalancedBalance, for the package's external
// tests.
var ImbalancedBalance = imbalancedBalance

// WritePropensitySite is writePropensitySite, for the package's external
// tests.
var WritePropensitySite = writePropensitySite
