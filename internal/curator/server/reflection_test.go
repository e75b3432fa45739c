package server

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// TestReflection: Serve serves gRPC server reflection, which lists the
// Curator, unless Config.NoReflection, when the reflection service is
// Unimplemented.
func TestReflection(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	for _, off := range []bool{false, true} {
		g := serveGuarded(t, st, Config{NoReflection: off}, Limits{})
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		defer cancel()
		s, err := reflectionpb.NewServerReflectionClient(curatortest.Dial(t, g.addr)).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		var resp *reflectionpb.ServerReflectionResponse
		if err == nil {
			resp, err = s.Recv()
		}
		var services []string
		for _, svc := range resp.GetListServicesResponse().GetService() {
			services = append(services, svc.GetName())
		}
		switch {
		case off && status.Code(err) != codes.Unimplemented:
			t.Errorf("NoReflection: %v, %v; want Unimplemented", services, err)
		case !off && (err != nil || !slices.Contains(services, apipb.Curator_ServiceDesc.ServiceName)):
			t.Errorf("reflection: %v, %v; want the Curator listed", services, err)
		}
	}
}
