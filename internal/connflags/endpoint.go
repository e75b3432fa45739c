package connflags

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodewatch/nodewatch/internal/cmdline"
	"github.com/nodewatch/nodewatch/internal/curator"
)

// etcdForms is what an --etcd endpoint may look like, as usage errors
// say it.
const etcdForms = "want HOST:PORT, http://HOST:PORT or https://HOST:PORT"

// curatorForms is what a --curator endpoint may look like, as usage
// errors say it.
func curatorForms() string {
	return fmt.Sprintf("want HOST:PORT (or HOST alone for port %d)", curator.DefaultPort)
}

// etcdEndpoint checks one --etcd endpoint: HOST:PORT, http://HOST:PORT or
// https://HOST:PORT (a trailing "/" allowed), or a socket (unix:PATH,
// unix://PATH, and unixs: for TLS over it, as etcd's client takes them).
// Every other form is a usage error naming the flag and the forms, found
// before anything dials: etcd's client would otherwise try it until
// --dial-timeout and then say little of why.
func etcdEndpoint(ep string) error {
	if isSocket(ep) {
		return nil
	}
	hostport := ep
	if scheme, rest, ok := strings.Cut(ep, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return cmdline.Usagef("--etcd %s: unknown scheme %q: %s", ep, scheme, etcdForms)
		}
		hostport = rest
	}
	if strings.Contains(hostport, "@") {
		// Not repeated: what comes before the @ may hold a password.
		return cmdline.Usagef("--etcd: an endpoint names a user: give it with --user NAME[:PASSWORD], and the endpoint as HOST:PORT, http://HOST:PORT or https://HOST:PORT")
	}
	if i := strings.IndexAny(hostport, "/?#"); i >= 0 {
		if hostport[i:] != "/" || hostport == ep {
			return cmdline.Usagef("--etcd %s: not an endpoint (a path or a query?): %s", ep, etcdForms)
		}
		hostport = hostport[:i]
	}
	_, err := hostPort("--etcd", ep, hostport, 0, etcdForms)
	return err
}

// curatorEndpoint checks one --curator endpoint and returns it as
// HOST:PORT: a HOST alone gets the Curator's port (curator.DefaultPort),
// as the reference documents. A socket (unix:PATH), which gRPC dials,
// stays as it is. Every other form is a usage error naming the flag.
func curatorEndpoint(ep string) (string, error) {
	if isSocket(ep) && !strings.HasPrefix(ep, "unixs:") {
		return ep, nil
	}
	if scheme, _, ok := strings.Cut(ep, "://"); ok {
		hint := ""
		if scheme == "https" {
			hint = ", with --tls (or --cacert FILE) for TLS"
		}
		return "", cmdline.Usagef("--curator %s: want HOST:PORT, a gRPC address without a scheme%s", ep, hint)
	}
	if strings.ContainsAny(ep, "/?#@") {
		return "", cmdline.Usagef("--curator %s: not an endpoint: %s", ep, curatorForms())
	}
	return hostPort("--curator", ep, ep, curator.DefaultPort, curatorForms())
}

// isSocket reports whether ep names a Unix socket as etcd's client and
// gRPC take one (unix:PATH, unix://PATH; unixs: the same with TLS).
func isSocket(ep string) bool {
	for _, p := range []string{"unix:", "unixs:"} {
		if path, ok := strings.CutPrefix(ep, p); ok && strings.TrimPrefix(path, "//") != "" {
			return true
		}
	}
	return false
}

// hostPort checks hostport, the HOST:PORT of the endpoint ep of flag, and
// returns it as HOST:PORT; a HOST without a port gets defaultPort, or is
// an error when it is 0. forms says what ep may look like.
func hostPort(flag, ep, hostport string, defaultPort int, forms string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	var ae *net.AddrError
	switch {
	case err == nil:
	case errors.As(err, &ae) && ae.Err == "missing port in address":
		host, port = hostport, ""
		if b, ok := strings.CutPrefix(host, "["); ok {
			if host, ok = strings.CutSuffix(b, "]"); !ok || strings.ContainsAny(host, "[]") {
				return "", cmdline.Usagef("%s %s: bad IPv6 address %q: %s, an IPv6 address in brackets ([::1]:2379)", flag, ep, hostport, forms)
			}
			if !strings.Contains(host, ":") {
				return "", cmdline.Usagef("%s %s: %q in brackets is not an IPv6 address: %s", flag, ep, host, forms)
			}
		}
		if defaultPort == 0 {
			return "", cmdline.Usagef("%s %s: no port: %s", flag, ep, forms)
		}
		port = strconv.Itoa(defaultPort)
	case errors.As(err, &ae) && ae.Err == "too many colons in address":
		if a, perr := netip.ParseAddr(hostport); perr == nil && a.Is6() {
			return "", cmdline.Usagef("%s %s: an IPv6 address goes in brackets, with its port: [%s]:PORT", flag, ep, hostport)
		}
		return "", cmdline.Usagef("%s %s: too many colons: %s (an IPv6 address in brackets, [::1]:2379)", flag, ep, forms)
	default: // brackets out of place
		return "", cmdline.Usagef("%s %s: bad IPv6 address in %q: %s, an IPv6 address in brackets ([::1]:2379)", flag, ep, hostport, forms)
	}
	if err := checkHost(host); err != nil {
		return "", cmdline.Usagef("%s %s: %v: %s", flag, ep, err, forms)
	}
	if port == "" {
		return "", cmdline.Usagef("%s %s: no port: %s", flag, ep, forms)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", cmdline.Usagef("%s %s: bad port %q (want 1 to 65535): %s", flag, ep, port, forms)
	}
	return net.JoinHostPort(host, port), nil
}

// checkHost checks the host of an endpoint: a name (letters, digits, '-',
// '_' and '.'), an IPv4 address, or an IPv6 address (taken out of its
// brackets).
func checkHost(host string) error {
	if host == "" {
		return errors.New("no host")
	}
	if strings.Contains(host, ":") {
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
			return errors.New("bad IPv6 address " + strconv.Quote(host))
		}
		return nil
	}
	digits := true
	for _, r := range host {
		switch {
		case r >= '0' && r <= '9', r == '.':
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '_':
			digits = false
		default:
			return errors.New("bad host " + strconv.Quote(host))
		}
	}
	if _, err := netip.ParseAddr(host); digits && err != nil {
		return errors.New("bad IPv4 address " + strconv.Quote(host))
	}
	return nil
}
