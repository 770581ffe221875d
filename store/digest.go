package store

import (
	"crypto/sha256"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"math"

	"modernc.org/sqlite"
)

// digestFunc is the SQL function, registered with the driver for crffd's
// connections, that gives a row's digest from its treatment, outcome and
// covariate columns as stored: ForgetEdited compares it with the digest
// kept with a row's CATE.
const digestFunc = "crff_x_digest"

// errDigestFunc is why registering digestFunc failed, nil when it did not.
var errDigestFunc = sqlite.RegisterDeterministicScalarFunction(digestFunc, -1,
	func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		d, err := valuesDigest(args)
		if err != nil {
			return nil, err
		}
		return d[:], nil
	})

// valuesDigest is the SHA-256 of a row's values as SQLite stores them
// (integer, real, text, blob or NULL), each with its type, so that any edit
// of one of them changes it, and nothing else does.
func valuesDigest[T any](vals []T) (RowDigest, error) {
	h := sha256.New()
	var buf [9]byte
	for _, raw := range vals {
		switch v := any(raw).(type) {
		case nil:
			h.Write([]byte{0})
		case int64:
			buf[0] = 1
			binary.LittleEndian.PutUint64(buf[1:], uint64(v))
			h.Write(buf[:])
		case float64:
			buf[0] = 2
			binary.LittleEndian.PutUint64(buf[1:], math.Float64bits(v))
			h.Write(buf[:])
		case string:
			buf[0] = 3
			binary.LittleEndian.PutUint64(buf[1:], uint64(len(v)))
			h.Write(buf[:])
			h.Write([]byte(v))
		case []byte:
			buf[0] = 4
			binary.LittleEndian.PutUint64(buf[1:], uint64(len(v)))
			h.Write(buf[:])
			h.Write(v)
		default:
			return RowDigest{}, fmt.Errorf("row digest: value of type %T", raw)
		}
	}
	var d RowDigest
	h.Sum(d[:0])
	return d, nil
}
