//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// streamsResult is what `compare streams` prints: latencies in seconds
// from a put's start to its arrival on a stream, over every stream and
// update; etcd's watcher count while the streams were open; and serve's
// memory in bytes (zero without -serve-pid).
type streamsResult struct {
	P50, P99, Max float64
	Watchers      int
	// Open is the seconds from the first Watch call until every stream
	// had its backlog; Backlog the bytes of the backlog of one stream
	// (with -raw).
	Open    float64
	Backlog int64
	// RSSBefore is serve's RSS once it serves, before any stream;
	// RSSIdle with every stream open and idle for -settle; Peak serve's
	// peak RSS from just before the streams opened to the end (its
	// high-water mark is reset then), or to the last backlog with
	// -updates 0.
	RSSBefore, RSSIdle, Peak int64
	// ServeCPU and ClientCPU are the CPU seconds serve and this client
	// used while the updates fanned out, per update and stream (the
	// client's: when it is not measured alone, it takes its share of the
	// machine's cores).
	ServeCPU, ClientCPU float64
}

// streamsMain is the load client of rows 6, 9 and 10: it opens -streams
// Watch (nodes_in_cluster) streams on -curator over -conns connections,
// all at once, waits until each has its backlog, then writes -updates
// changes of one record through etcd, one at a time, and measures when
// each reaches each stream. With -serve-pid it reads serve's memory and
// CPU around that (/proc); with -raw the streams only count the bytes of
// their backlog; -hold keeps the idle streams open that long before the
// updates (to profile serve meanwhile). Its streams are read by a light
// HTTP/2 client of its own (h2Conn) unless -client grpc asks for
// grpc-go's, which costs more CPU per event than serve spends sending it.
func streamsMain(args []string) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	addr := fs.String("curator", "", "serve's address")
	etcdURL := fs.String("etcd", "", "etcd's client URL")
	prefix := fs.String("prefix", "", "the records' prefix")
	n := fs.Int("streams", 1000, "Watch streams")
	conns := fs.Int("conns", 10, "connections the streams share")
	updates := fs.Int("updates", 50, "updates to fan out")
	pid := fs.Int("serve-pid", 0, "serve's process id, to read its memory (0: not read)")
	settle := fs.Duration("settle", 2*time.Second, "how long serve is left alone before its memory is read")
	raw := fs.Bool("raw", false, "count the events' bytes instead of decoding them")
	client := fs.String("client", "h2", "the streams' client: h2 (one goroutine per connection reads every stream; costs little per event) or grpc (grpc-go's, as nodewatch's)")
	hold := fs.Duration("hold", 0, "keep the idle streams open this long before the updates")
	verbose := fs.Bool("v", false, "print each update's latencies on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *updates > 0 && *raw {
		return fmt.Errorf("-raw streams do not decode the updates: give -updates 0")
	}
	if *client != "h2" && *client != "grpc" {
		return fmt.Errorf("-client: %q is neither h2 nor grpc", *client)
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{*etcdURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer etcd.Close()
	put := func(seq int) error {
		v, err := curator.EncodeRecord(&apipb.Node{Id: fanMarker, State: commonpb.NodeState_NODE_STATE_UP,
			Labels: &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "seq", Value: strconv.Itoa(seq)}}}})
		if err != nil {
			return err
		}
		_, err = etcd.Put(context.Background(), *prefix+fanMarker, string(v))
		return err
	}
	if *updates > 0 {
		if err := put(0); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// grpc-go's connections: the streams' with -client grpc; the one
	// that asks serve's health otherwise.
	var cs []*grpc.ClientConn
	for range *conns {
		if *client != "grpc" && len(cs) == 1 {
			break
		}
		c, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer c.Close()
		cs = append(cs, c)
	}
	var res streamsResult
	if err := waitServing(ctx, cs[0]); err != nil {
		return err
	}
	if *pid != 0 {
		time.Sleep(*settle)
		if res.RSSBefore, err = procBytes(*pid, "VmRSS"); err != nil {
			return err
		}
		if err := resetPeak(*pid); err != nil {
			return err
		}
	}

	// arrivals[seq] holds when each stream saw update seq; the last one
	// closes all[seq].
	var mu sync.Mutex
	arrivals := make([][]time.Time, *updates+1)
	all := make([]chan struct{}, *updates+1)
	for i := range all {
		all[i] = make(chan struct{})
	}
	arrived := func(seq int, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		arrivals[seq] = append(arrivals[seq], at)
		if len(arrivals[seq]) == *n {
			close(all[seq])
		}
	}
	var backlogged sync.WaitGroup
	errs := make(chan error, *n)
	// event takes stream i's next event; done says that it had its
	// backlog, or failed before (err).
	event := func(i int, ev []byte, inBacklog bool, done func(err error)) {
		if inBacklog {
			re, err := scanEvent(ev)
			if err != nil {
				done(err)
				return
			}
			if i == 0 {
				mu.Lock()
				res.Backlog += int64(re.size)
				mu.Unlock()
			}
			if re.last {
				done(nil)
			}
			return
		}
		if *raw {
			return
		}
		now := time.Now()
		var we apipb.WatchEvent
		if err := proto.Unmarshal(ev, &we); err != nil {
			return
		}
		for _, node := range we.GetNodes() {
			if node.GetId() != fanMarker {
				continue
			}
			for _, p := range node.GetLabels().GetPairs() {
				if seq, err := strconv.Atoi(p.GetValue()); p.GetKey() == "seq" && err == nil && seq >= 1 && seq <= *updates {
					arrived(seq, now)
				}
			}
		}
	}
	backlogged.Add(*n)
	start := time.Now()
	if *client == "h2" {
		var hs []*h2Conn
		for range *conns {
			h, err := dialH2(*addr, func(s *h2Stream, ev []byte) {
				event(s.i, ev, !s.last, func(err error) {
					if !s.last {
						s.last = true
						if err != nil {
							errs <- err
						}
						backlogged.Done()
					}
				})
			}, func(s *h2Stream, err error) {
				if !s.last {
					s.last = true
					errs <- fmt.Errorf("stream %d: %w", s.i, err)
					backlogged.Done()
				}
			})
			if err != nil {
				return err
			}
			defer h.close()
			go h.run()
			hs = append(hs, h)
		}
		for i := range *n {
			if err := hs[i%len(hs)].watch(i); err != nil {
				return err
			}
		}
	}
	for i := range *n {
		if *client != "grpc" {
			break
		}
		go func() {
			inBacklog := true
			done := func(err error) {
				if inBacklog {
					inBacklog = false
					if err != nil {
						errs <- err
					}
					backlogged.Done()
				}
			}
			done(watchBytes(ctx, cs[i%len(cs)], func(ev []byte) { event(i, ev, inBacklog, done) }))
		}()
	}
	backlogged.Wait()
	res.Open = time.Since(start).Seconds()
	select {
	case err := <-errs:
		return err
	default:
	}
	if *pid != 0 {
		if *updates == 0 {
			// The peak of the backlogs, before settling lets the
			// runtime give memory back.
			if res.Peak, err = procBytes(*pid, "VmHWM"); err != nil {
				return err
			}
		}
		time.Sleep(*settle)
		if res.RSSIdle, err = procBytes(*pid, "VmRSS"); err != nil {
			return err
		}
	}
	if res.Watchers, err = metricsWatchers(*etcdURL); err != nil {
		return err
	}
	if *hold > 0 {
		fmt.Fprintf(os.Stderr, "compare streams: %d streams open and idle; holding them %v\n", *n, *hold)
		time.Sleep(*hold)
	}
	var lat []float64
	var serveCPU, clientCPU time.Duration
	if *pid != 0 {
		if serveCPU, err = procCPU(*pid); err != nil {
			return err
		}
	}
	clientCPU = selfCPU()
	for seq := 1; seq <= *updates; seq++ {
		start := time.Now()
		if err := put(seq); err != nil {
			return err
		}
		select {
		case <-all[seq]:
		case <-time.After(time.Minute):
			mu.Lock()
			got := len(arrivals[seq])
			mu.Unlock()
			return fmt.Errorf("update %d reached %d of %d streams in a minute", seq, got, *n)
		}
		mu.Lock()
		var one []float64
		for _, at := range arrivals[seq] {
			one = append(one, at.Sub(start).Seconds())
		}
		mu.Unlock()
		lat = append(lat, one...)
		if *verbose {
			fmt.Fprintf(os.Stderr, "update %d: p50 %s p90 %s p99 %s max %s\n", seq, millis(percentile(one, 50)), millis(percentile(one, 90)),
				millis(percentile(one, 99)), millis(percentile(one, 100)))
		}
	}
	if *updates > 0 {
		deliveries := float64(*updates * *n)
		res.ClientCPU = (selfCPU() - clientCPU).Seconds() / deliveries
		if *pid != 0 {
			cpu, err := procCPU(*pid)
			if err != nil {
				return err
			}
			res.ServeCPU = (cpu - serveCPU).Seconds() / deliveries
			if res.Peak, err = procBytes(*pid, "VmHWM"); err != nil {
				return err
			}
		}
	}
	res.P50, res.P99, res.Max = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// watchAll is the request of every stream: nodes_in_cluster.
var watchAll = &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}

// waitServing waits until serve's health service says SERVING: it has
// read its initial state.
func waitServing(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	h := healthpb.NewHealthClient(cc)
	for {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("serve not serving after 2m (last: %v, %v)", r.GetStatus(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// watchBytes follows one stream with grpc-go, calling event with the
// bytes of each of its events (not to be kept). It returns when the
// stream ends, with its error.
func watchBytes(ctx context.Context, cc *grpc.ClientConn, event func(ev []byte)) error {
	s, err := cc.NewStream(ctx, &apipb.Curator_ServiceDesc.Streams[0], apipb.Curator_Watch_FullMethodName,
		grpc.WaitForReady(true), grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := s.SendMsg(watchAll); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		var ev []byte
		if err := s.RecvMsg(&ev); err != nil {
			return err
		}
		event(ev)
	}
}

// rawEvent is what scanEvent reads of a WatchEvent: its size, and
// whether it is marked PROGRESS_LAST_BACKLOGGED.
type rawEvent struct {
	size int
	last bool
}

// fieldProgress is WatchEvent.progress's field number.
const fieldProgress = 2

// scanEvent reads the size and the progress marker of the WatchEvent b,
// stepping over its other fields without decoding the nodes.
func scanEvent(b []byte) (rawEvent, error) {
	ev := rawEvent{size: len(b)}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ev, protowire.ParseError(n)
		}
		b = b[n:]
		if num == fieldProgress && typ == protowire.VarintType {
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return ev, protowire.ParseError(n)
			}
			ev.last = x == uint64(apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED)
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return ev, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return ev, nil
}

// rawCodec marshals requests as protobuf and reads responses as their
// bytes (into a *[]byte), so that a stream's events are looked into as
// the h2 client does.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }

func (rawCodec) Unmarshal(b []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec reads into a *[]byte, not a %T", v)
	}
	*p = append((*p)[:0], b...)
	return nil
}
