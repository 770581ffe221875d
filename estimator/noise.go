package estimator

// Stream identifiers keep the random streams of different purposes apart even
// when they share Config.Seed.
const (
	streamOmega   uint64 = 0x6f6d656761 // "omega"
	streamLatent  uint64 = 0x6c6174656e // "laten"
	streamEffects uint64 = 0x6566666563 // "effec"
	streamInit    uint64 = 0x696e6974   // "init"
)

// splitmix64 is the finaliser of SplitMix64. It spreads nearby integers
// (site numbers, rounds) over the whole 64-bit range so that the PCG streams
// they select are unrelated.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// mix combines a stream identifier and keys into one 64-bit value. The
// random numbers of this package come from PCG generators seeded with
// mix(stream, keys...) for their purpose's stream and keys, which is what
// makes runs reproducible.
func mix(stream uint64, keys ...uint64) uint64 {
	h := splitmix64(stream)
	for _, k := range keys {
		h = splitmix64(h ^ k)
	}
	return h
}
