package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Direction says whether a captured envelope was sent or received.
type Direction byte

const (
	// Sent marks an envelope the transport put on the wire.
	Sent Direction = '>'
	// Received marks an envelope the transport took off the wire.
	Received Direction = '<'
)

// maxCaptureRecord bounds one record ReadCapture accepts.
const maxCaptureRecord = 256 << 20

// Capture appends every envelope a transport carries to a file, as the
// bytes that crossed the wire, so that a test can scan all of them. Each
// record is one direction byte ('>' sent, '<' received), the length as an
// unsigned varint, and the encoded envelope. A nil *Capture records
// nothing. It is safe for concurrent use; each transport should have a
// file of its own.
type Capture struct {
	mu sync.Mutex
	f  *os.File
}

// OpenCapture opens path for appending (mode 0600), or returns nil when
// path is empty.
func OpenCapture(path string) (*Capture, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("transport: open capture file: %w: %w", ErrConfig, err)
	}
	return &Capture{f: f}, nil
}

// Record appends one envelope's bytes.
func (c *Capture) Record(d Direction, b []byte) error {
	if c == nil {
		return nil
	}
	rec := make([]byte, 0, 1+binary.MaxVarintLen64+len(b))
	rec = append(rec, byte(d))
	rec = binary.AppendUvarint(rec, uint64(len(b)))
	rec = append(rec, b...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.f.Write(rec); err != nil {
		return fmt.Errorf("transport: capture: %w", err)
	}
	return nil
}

// Close closes the file.
func (c *Capture) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.Close()
}

// CaptureRecord is one captured envelope.
type CaptureRecord struct {
	Direction Direction
	Envelope  []byte
}

// ReadCapture reads the records of a capture file.
func ReadCapture(r io.Reader) ([]CaptureRecord, error) {
	br := bufio.NewReader(r)
	var out []CaptureRecord
	for {
		d, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("transport: read capture: %w", err)
		}
		if Direction(d) != Sent && Direction(d) != Received {
			return out, fmt.Errorf("transport: capture record %d: direction byte %#x", len(out), d)
		}
		n, err := binary.ReadUvarint(br)
		if err != nil || n > maxCaptureRecord {
			return out, fmt.Errorf("transport: capture record %d: bad length", len(out))
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return out, fmt.Errorf("transport: capture record %d: %w", len(out), err)
		}
		out = append(out, CaptureRecord{Direction: Direction(d), Envelope: b})
	}
}
