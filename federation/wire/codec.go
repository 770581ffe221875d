package wire

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/crffd/crffd/federation/wire/wirepb"
)

// Proto returns the protobuf form of the envelope. It shares the payload's
// slices with e.
func (e *Envelope) Proto() *wirepb.Envelope {
	p := &wirepb.Payload{}
	for _, t := range e.tensors {
		shape := make([]uint64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = uint64(d)
		}
		p.Tensors = append(p.Tensors, &wirepb.Tensor{Name: t.Name, Shape: shape, Values: t.Values})
	}
	for _, l := range e.lists {
		data := make([]byte, 0, DigestSize*len(l.Digests))
		for i := range l.Digests {
			data = append(data, l.Digests[i][:]...)
		}
		p.Digests = append(p.Digests, &wirepb.DigestList{Name: l.Name, Data: data})
	}
	return &wirepb.Envelope{
		RunId:         e.RunID,
		Model:         e.Model,
		Round:         e.Round,
		Kind:          wirepb.Kind(e.Kind),
		Sender:        e.Sender,
		Recipient:     e.Recipient,
		Payload:       p,
		PayloadSha256: append([]byte(nil), e.digest[:]...),
	}
}

// Marshal validates the envelope and returns its protobuf encoding.
func (e *Envelope) Marshal() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(e.Proto())
	if err != nil {
		return nil, &Error{Header: e.Header, Err: fmt.Errorf("encode: %w", err)}
	}
	if len(b) > MaxEnvelopeBytes {
		return nil, &Error{Header: e.Header, Err: fmt.Errorf("encoded size %d exceeds %d bytes: %w", len(b), MaxEnvelopeBytes, ErrTooLarge)}
	}
	return b, nil
}

// Unmarshal decodes and validates an envelope. Unknown fields, a kind
// outside Kinds, a shape that does not match its values, a value
// that is not finite and a payload digest that does not match are all
// refused. Errors are *Error values that carry whatever header was decoded.
func Unmarshal(b []byte) (*Envelope, error) {
	if len(b) > MaxEnvelopeBytes {
		return nil, &Error{Err: fmt.Errorf("%d bytes, more than %d: %w", len(b), MaxEnvelopeBytes, ErrTooLarge)}
	}
	var p wirepb.Envelope
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, &Error{Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
	}
	return FromProto(&p)
}

// FromProto converts and validates a protobuf envelope, as Unmarshal does.
// The envelope shares the tensors' value slices with p.
func FromProto(p *wirepb.Envelope) (*Envelope, error) {
	if p == nil {
		return nil, &Error{Err: fmt.Errorf("%w: no envelope", ErrMalformed)}
	}
	e := &Envelope{Header: Header{
		RunID:     p.GetRunId(),
		Model:     p.GetModel(),
		Round:     p.GetRound(),
		Kind:      Kind(p.GetKind()),
		Sender:    p.GetSender(),
		Recipient: p.GetRecipient(),
	}}
	fail := func(err error) (*Envelope, error) { return nil, &Error{Header: e.Header, Err: err} }
	if err := noUnknownFields(p.ProtoReflect()); err != nil {
		return fail(err)
	}
	pl := p.GetPayload()
	if n := len(pl.GetTensors()) + len(pl.GetDigests()); n > MaxTensors {
		return fail(fmt.Errorf("%d tensors and digest lists, more than %d: %w", n, MaxTensors, ErrTooLarge))
	}
	for _, t := range pl.GetTensors() {
		if len(t.GetShape()) > MaxRank {
			return fail(fmt.Errorf("tensor %q has rank %d, more than %d: %w", t.GetName(), len(t.GetShape()), MaxRank, ErrShape))
		}
		shape := make([]int, len(t.GetShape()))
		for i, d := range t.GetShape() {
			if d > MaxValues {
				return fail(fmt.Errorf("tensor %q has dimension %d: %w", t.GetName(), d, ErrShape))
			}
			shape[i] = int(d)
		}
		e.tensors = append(e.tensors, Tensor{Name: t.GetName(), Shape: shape, Values: t.GetValues()})
	}
	for _, l := range pl.GetDigests() {
		data := l.GetData()
		if len(data)%DigestSize != 0 {
			return fail(fmt.Errorf("digest list %q has %d bytes, not a multiple of %d: %w", l.GetName(), len(data), DigestSize, ErrDigestList))
		}
		ds := make([]Digest, len(data)/DigestSize)
		for i := range ds {
			copy(ds[i][:], data[i*DigestSize:])
		}
		e.lists = append(e.lists, DigestList{Name: l.GetName(), Digests: ds})
	}
	sum := p.GetPayloadSha256()
	if len(sum) != DigestSize {
		return fail(fmt.Errorf("payload SHA-256 has %d bytes, want %d: %w", len(sum), DigestSize, ErrDigest))
	}
	copy(e.digest[:], sum)
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}

// noUnknownFields refuses fields this version does not know, anywhere in
// the message: an envelope carries nothing a reader cannot see.
func noUnknownFields(m protoreflect.Message) error {
	if len(m.GetUnknown()) > 0 {
		return fmt.Errorf("%w: unknown field in %s", ErrMalformed, m.Descriptor().FullName())
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil:
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = noUnknownFields(l.Get(i).Message())
			}
		default:
			err = noUnknownFields(v.Message())
		}
		return err == nil
	})
	return err
}
