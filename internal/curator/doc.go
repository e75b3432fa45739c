// Package curator holds what both ends of the Monogon Metropolis Curator's
// Watch RPC share in nodewatch: the wire code (apipb, commonpb and
// versionpb, generated from third_party/proto/), the facts of the wire (DefaultPort,
// MaxEventSize), node records as `serve` reads them from etcd
// (DefaultPrefix, DecodeRecord, EncodeRecord), the printed form of a node
// (Object; ObjectOfWire, straight from its binary encoding) and what a
// person reads of it (Summary), and the owner
// credentials metroctl keeps (AddMetroctl, DefaultMetroctlDir; read with
// dial's PEM loader). The
// certificate check a Metropolis client needs is dial.CuratorTLS: dial
// opens every connection.
//
// The client, the source behind `nodewatch nodes` and `nodewatch node ID`,
// is package client; the server, `nodewatch serve`, is package server.
// testkit/curatortest has what their tests share.
package curator
