package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sandboxkit/sandbox"
	sbopenai "github.com/sandboxkit/sandbox/contrib/openai"
	_ "github.com/sandboxkit/sandbox/provider/memory" // registers memory://
)

// scriptedModel stands in for the Responses API: each request gets the
// next scripted list of output items.
func scriptedModel(turns ...string) *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"resp_%d","object":"response","created_at":0,"status":"completed","model":"gpt-5.1","output":%s}`, i+1, turns[min(i, len(turns)-1)])
	}))
}

// A model's shell and apply_patch calls run in a sandbox, not on the host:
// Run sends each response's calls to the sandbox and their outputs back
// to the model until it answers.
func Example() {
	ctx := context.Background()
	model := scriptedModel(
		`[{"type":"apply_patch_call","id":"ap_1","call_id":"call_1","status":"completed",
		   "operation":{"type":"create_file","path":"hello.py","diff":"+print('hello')\n"}}]`,
		`[{"type":"shell_call","id":"sh_1","call_id":"call_2","status":"completed","environment":{"type":"local"},
		   "action":{"commands":["cat hello.py","ls /nowhere"],"timeout_ms":10000,"max_output_length":2000}}]`,
		`[{"type":"message","id":"msg_1","role":"assistant","status":"completed",
		   "content":[{"type":"output_text","text":"hello.py is written.","annotations":[]}]}]`,
	)
	defer model.Close()

	client, err := sandbox.Open(ctx, "memory://") // "" for the local provider, e2b://, daytona://
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	tools, err := sbopenai.New(sb, sbopenai.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer tools.Close()

	oc := oai.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("sk-example"))
	resp, err := tools.Run(ctx, shown{&oc.Responses}, responses.ResponseNewParams{
		Model: "gpt-5.1",
		Tools: tools.Params(),
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("Write hello.py and show it.")},
	}, sbopenai.RunOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("model:", resp.OutputText())
	// Output:
	// apply_patch call_1: completed "Created hello.py (15 bytes)"
	// shell call_2: stdout="print('hello')\n" stderr="" outcome={"exit_code":0,"type":"exit"}
	// shell call_2: stdout="" stderr="ls: cannot access '/nowhere': No such file or directory\n" outcome={"exit_code":2,"type":"exit"}
	// model: hello.py is written.
}

// shown prints the tool outputs each request carries back to the model.
type shown struct{ sbopenai.ResponseCreator }

func (s shown) New(ctx context.Context, p responses.ResponseNewParams, opts ...option.RequestOption) (*responses.Response, error) {
	for _, it := range p.Input.OfInputItemList {
		if o := it.OfApplyPatchCallOutput; o != nil {
			fmt.Printf("apply_patch %s: %s %q\n", o.CallID, o.Status, o.Output.Value)
		}
		if o := it.OfShellCallOutput; o != nil {
			for _, c := range o.Output {
				b, _ := json.Marshal(c.Outcome)
				fmt.Printf("shell %s: stdout=%q stderr=%q outcome=%s\n", o.CallID, c.Stdout, c.Stderr, b)
			}
		}
	}
	return s.ResponseCreator.New(ctx, p, opts...)
}
