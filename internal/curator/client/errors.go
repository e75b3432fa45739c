package client

import (
	"errors"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errDialWindow cancels an attempt when DialTimeout passes before the
// first stream is established.
var errDialWindow = errors.New("dial timeout passed")

// fatalError marks an error that retrying cannot fix.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// isFatal reports whether a server refusing a watch with code refuses it
// for good: asking again, elsewhere, gives the same answer.
func isFatal(code codes.Code) bool {
	switch code {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound,
		codes.FailedPrecondition, codes.OutOfRange, codes.AlreadyExists:
		return true
	}
	return false
}

// plain returns err with gRPC's wrapping of a failed connection taken
// off its message: "rpc error: code = Unavailable desc = connection
// error: desc = \"transport: authentication handshake failed: x509: …\""
// becomes "x509: …", which says why (the credentials' errors name the
// files and flags). The result keeps err's status for status.Code.
func plain(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return err
	}
	msg := st.Message()
	if rest, ok := strings.CutPrefix(msg, "connection error: desc = "); ok {
		if u, uerr := strconv.Unquote(rest); uerr == nil {
			msg = u
		}
	}
	for _, p := range []string{"transport: authentication handshake failed: ", "transport: Error while dialing: ", "error reading server preface: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return &plainError{msg: msg, err: err}
}

// plainError is an error with a plainer message.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }
