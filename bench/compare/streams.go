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

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// streamsResult is what `compare streams` prints: latencies in seconds
// from a put's start to its arrival on a stream, over every stream and
// update, and etcd's watcher count while the streams were open.
type streamsResult struct {
	P50, P99, Max float64
	Watchers      int
}

// streamsMain is the load client of row 6: it opens -streams Watch
// (nodes_in_cluster) streams on -curator over -conns connections, waits
// until each has its backlog, then writes -updates changes of one record
// through etcd, one at a time, and measures when each reaches each
// stream.
func streamsMain(args []string) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	addr := fs.String("curator", "", "serve's address")
	etcdURL := fs.String("etcd", "", "etcd's client URL")
	prefix := fs.String("prefix", "", "the records' prefix")
	n := fs.Int("streams", 1000, "Watch streams")
	conns := fs.Int("conns", 10, "gRPC connections the streams share")
	updates := fs.Int("updates", 50, "updates to fan out")
	if err := fs.Parse(args); err != nil {
		return err
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
	if err := put(0); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cs []*grpc.ClientConn
	for range *conns {
		c, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer c.Close()
		cs = append(cs, c)
	}
	// arrived[seq] counts the streams that saw update seq; the last one
	// closes all[seq].
	var mu sync.Mutex
	arrivals := make([][]time.Time, *updates+1)
	all := make([]chan struct{}, *updates+1)
	for i := range all {
		all[i] = make(chan struct{})
	}
	var backlogged sync.WaitGroup
	errs := make(chan error, *n)
	for i := range *n {
		backlogged.Add(1)
		go func() {
			w, err := apipb.NewCuratorClient(cs[i%len(cs)]).Watch(ctx, &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}, grpc.WaitForReady(true))
			if err != nil {
				errs <- err
				backlogged.Done()
				return
			}
			inBacklog := true
			for {
				ev, err := w.Recv()
				if err != nil {
					if inBacklog {
						errs <- err
						backlogged.Done()
					}
					return
				}
				now := time.Now()
				for _, node := range ev.GetNodes() {
					if node.GetId() != fanMarker {
						continue
					}
					for _, p := range node.GetLabels().GetPairs() {
						seq, err := strconv.Atoi(p.GetValue())
						if p.GetKey() != "seq" || err != nil || seq < 1 || seq > *updates {
							continue
						}
						mu.Lock()
						arrivals[seq] = append(arrivals[seq], now)
						if len(arrivals[seq]) == *n {
							close(all[seq])
						}
						mu.Unlock()
					}
				}
				if inBacklog && ev.GetProgress() == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
					inBacklog = false
					backlogged.Done()
				}
			}
		}()
	}
	backlogged.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	watchers, err := metricsWatchers(*etcdURL)
	if err != nil {
		return err
	}
	var lat []float64
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
		for _, at := range arrivals[seq] {
			lat = append(lat, at.Sub(start).Seconds())
		}
		mu.Unlock()
	}
	res := streamsResult{P50: percentile(lat, 50), P99: percentile(lat, 99), Max: percentile(lat, 100), Watchers: watchers}
	return json.NewEncoder(os.Stdout).Encode(res)
}
