package dial

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
)

// Window is the flow-control window that nodewatch's clients give a
// server, for each stream and for the connection. grpc-go gives the
// connection's back as data arrives, so a stream's window is what bounds
// the bytes received and not yet read, per stream.
//
// grpc-go's default window grows with an estimate of the link's
// bandwidth-delay product, and to make that estimate the client pings the
// server whenever a data frame arrives and no ping is out. On a fast link,
// where the ack is back before the next change, that is a ping written and
// an ack read for every change: a sixth of nodewatch's CPU profile
// while it followed single puts on loopback, in a client that has
// nothing else to send. A fixed window writes only a window update for
// every quarter of it that was read. It is the most the estimate ever
// grows to, 16 MiB, so that a listing or a backlog flows as fast as it
// did. A quiet stream's window now starts there too, where the
// estimate kept it near 64 KiB until a burst; every source reads its
// stream as it arrives (into its hand-off queue), so that window is not
// a buffer that fills.
const Window = 16 << 20

// receiveOptions fix the stream's and the connection's windows at Window,
// and read into recvPool's buffers.
func receiveOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(Window), grpc.WithStaticConnWindowSize(Window),
		experimental.WithBufferPool(recvPool)}
}
