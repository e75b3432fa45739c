package etcdkv

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodewatch/nodewatch/internal/dial"
)

// Hint says of each key followed (without Prefix) that does not exist
// while keys live under it how many do, and that --prefix follows them,
// a line each:
// "key /nodes does not exist, but 5 keys start with /nodes/: did you
// mean --prefix?". It asks etcd to count (WithCountOnly) the keys under
// each key, and the key itself only where some are. It opens a client of its own, and closes it. It is
// watch.Hinter: the run asks it when the view is empty after the
// initial state.
func (s *Source) Hint(ctx context.Context) ([]string, error) {
	if s.Watcher.Prefix {
		return nil, nil
	}
	client, err := dial.Etcd(ctx, s.Config)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	count := func(key string, opts ...clientv3.OpOption) (int64, error) {
		resp, err := client.Get(ctx, key, append(opts, clientv3.WithCountOnly())...)
		if err != nil {
			return 0, fmt.Errorf("count %q: %w", key, client.Explain(err))
		}
		return resp.Count, nil
	}
	var hints []string
	for _, k := range Followed(s.Watcher.Keys, false) {
		under := k
		if !strings.HasSuffix(k, "/") {
			under += "/"
		}
		n, err := count(under, clientv3.WithPrefix())
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		if under != k {
			there, err := count(k)
			if err != nil {
				return nil, err
			}
			if there > 0 {
				continue // it exists: its value keeps it out of the view
			}
		}
		keys := fmt.Sprintf("%d keys start", n)
		if n == 1 {
			keys = "1 key starts"
		}
		hints = append(hints, fmt.Sprintf("key %s does not exist, but %s with %s: did you mean --prefix?", k, keys, under))
	}
	return hints, nil
}
