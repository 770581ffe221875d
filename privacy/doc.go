// Package privacy is a differential-privacy accountant for the Gaussian
// mechanism and its Poisson-subsampled form: the Rényi DP (RDP) of one
// step, its composition over steps and runs (Accountant), the conversion
// of the composed RDP to (ε, δ)-DP, and the calibration of the noise
// multiplier to a target ε (Calibrate).
//
// A step releases a sum of per-record contributions, each of L2 norm at
// most C, with Gaussian noise of standard deviation σ·C added to every
// coordinate, over records each included independently with probability q
// (q = 1: every record). Its RDP of order α is α/(2σ²) at q = 1 (Mironov
// 2017) and, for q < 1, the bound of Mironov, Talwar and Zhang (2019),
// computed as TensorFlow Privacy's rdp_accountant does: exactly by the
// binomial expansion at integer orders, by its convergent series at
// fractional ones. RDP composes by addition per order; Epsilon converts
// with the bound of Canonne, Kamath and Steinke (2020, Proposition 12),
// minimised over the orders.
package privacy
