package store

import (
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"
)

// idKind is the SQLite storage class of a RowID.
type idKind uint8

const (
	idNull idKind = iota
	idInteger
	idReal
	idText
	idBlob
)

// RowID is the value of a record's id column, as SQLite stores it. A usable
// id is an INTEGER or a TEXT ([RowID.Valid]); other values (NULL, REAL,
// BLOB) are only carried so that a rejected row can be named.
//
// RowIDs are comparable: two RowIDs are == exactly when SQLite holds the same
// value of the same storage class. A RowID is a driver.Valuer and a
// sql.Scanner, so it can be passed to and scanned from database/sql as is.
type RowID struct {
	kind idKind
	i    int64  // an integer, or a real's IEEE 754 bits: 32 bytes a row, not 40
	s    string // text, or the bytes of a blob
}

// IntID returns the INTEGER id v.
func IntID(v int64) RowID { return RowID{kind: idInteger, i: v} }

// TextID returns the TEXT id s.
func TextID(s string) RowID { return RowID{kind: idText, s: s} }

// Valid reports whether id can identify a row: it is an INTEGER or a TEXT.
func (id RowID) Valid() bool { return id.kind == idInteger || id.kind == idText }

// Int returns the value of an INTEGER id and true, or 0 and false.
func (id RowID) Int() (int64, bool) { return id.i, id.kind == idInteger }

// Text returns the value of a TEXT id and true, or "" and false.
func (id RowID) Text() (string, bool) { return id.s, id.kind == idText }

// String formats id as SQL would show it: 17, "abc" (a text, quoted), NULL,
// 1.5, or x'00ff'.
func (id RowID) String() string {
	switch id.kind {
	case idInteger:
		return strconv.FormatInt(id.i, 10)
	case idReal:
		return strconv.FormatFloat(math.Float64frombits(uint64(id.i)), 'g', -1, 64)
	case idText:
		return strconv.Quote(id.s)
	case idBlob:
		return "x'" + hex.EncodeToString([]byte(id.s)) + "'"
	default:
		return "NULL"
	}
}

// Value implements driver.Valuer: it returns the id with its storage class.
func (id RowID) Value() (driver.Value, error) {
	switch id.kind {
	case idInteger:
		return id.i, nil
	case idReal:
		return math.Float64frombits(uint64(id.i)), nil
	case idText:
		return id.s, nil
	case idBlob:
		return []byte(id.s), nil
	default:
		return nil, nil
	}
}

// Scan implements sql.Scanner.
func (id *RowID) Scan(src any) error {
	v, err := rowIDOf(src)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// rowIDOf converts a value scanned from SQLite into a RowID.
func rowIDOf(v any) (RowID, error) {
	switch v := v.(type) {
	case nil:
		return RowID{}, nil
	case int64:
		return IntID(v), nil
	case float64:
		return RowID{kind: idReal, i: int64(math.Float64bits(v))}, nil
	case string:
		return TextID(v), nil
	case []byte:
		return RowID{kind: idBlob, s: string(v)}, nil
	case bool:
		if v {
			return IntID(1), nil
		}
		return IntID(0), nil
	case time.Time:
		// The driver turns a text in a DATE or DATETIME column into a
		// time.Time; give back the text as SQLite holds it.
		return TextID(v.Format(time.RFC3339Nano)), nil
	default:
		return RowID{}, fmt.Errorf("row id of unsupported type %T", v)
	}
}
