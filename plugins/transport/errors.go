package transport

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/crffd/crffd/federation/wire"
)

// errorDomain marks the ErrorInfo details this package attaches to gRPC
// errors, so that the host recovers the sentinel error.
const errorDomain = "crffd.transport.v1"

// sentinels maps each sentinel error to its gRPC code and ErrorInfo reason.
var sentinels = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrConfig, codes.InvalidArgument, "CONFIG"},
	{ErrNotConfigured, codes.FailedPrecondition, "NOT_CONFIGURED"},
	{ErrSender, codes.PermissionDenied, "NOT_SENDER"},
	{ErrRecipient, codes.NotFound, "RECIPIENT"},
	{ErrRefused, codes.PermissionDenied, "REFUSED"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	{ErrQueueFull, codes.ResourceExhausted, "QUEUE_FULL"},
	{ErrEnvelope, codes.InvalidArgument, "ENVELOPE"},
}

// toStatus turns an error of a Transport into a gRPC status that carries
// its sentinel.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var we *wire.Error
	if errors.As(err, &we) && !errors.Is(err, ErrEnvelope) {
		err = fmt.Errorf("%w: %w", ErrEnvelope, err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			st := status.New(s.code, err.Error())
			if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: s.reason, Domain: errorDomain}); derr == nil {
				st = d
			}
			return st.Err()
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// remoteError is an error from the plugin: its message as the plugin wrote
// it, wrapping the sentinel it carried.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

// fromStatus turns a gRPC error from the plugin back into an error that
// wraps its sentinel, prefixed with the transport and operation.
func fromStatus(name, op string, err error) error {
	if err == nil {
		return nil
	}
	prefix := fmt.Sprintf("transport %q: %s: ", name, op)
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s%w", prefix, err)
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != errorDomain {
			continue
		}
		for _, s := range sentinels {
			if s.reason == info.GetReason() {
				return &remoteError{msg: prefix + st.Message(), err: s.err}
			}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return &remoteError{msg: prefix + st.Message(), err: context.Canceled}
	case codes.DeadlineExceeded:
		return &remoteError{msg: prefix + st.Message(), err: context.DeadlineExceeded}
	case codes.Unavailable:
		return &remoteError{msg: prefix + "plugin unavailable: " + st.Message(), err: ErrUnavailable}
	}
	return fmt.Errorf("%s%w", prefix, err)
}
