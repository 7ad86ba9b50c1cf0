package files

import (
	"context"
	"fmt"

	"github.com/firstmate/firstmate/tools"
)

// SendFileArgs are send_file's arguments.
type SendFileArgs struct {
	Path string `json:"path" jsonschema:"the workspace file to attach to your answer"`
}

// SendFile attaches a workspace file to the answer: the chat shows it as a
// file in the thread (the terminal names it). It checks the file now, so
// the model hears at once about a missing, special or oversized file.
func SendFile(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := fmt.Sprintf("Attach a file from the workspace to your answer, so the people in the chat get it as a file "+
		"(up to %s). Write the file first; call this once per file.", tools.FormatSize(o.MaxSendBytes))
	return tools.New("send_file", tools.PowerSend, desc, func(ctx context.Context, ws *tools.Workspace, a SendFileArgs) (tools.Result, error) {
		rel, err := tools.CleanFilePath(a.Path)
		if err != nil {
			return tools.Result{}, err
		}
		f, fi, err := ws.OpenRead(rel)
		if err != nil {
			return tools.Result{}, err
		}
		f.Close()
		if fi.Size() > o.MaxSendBytes {
			return tools.Result{}, &tools.FileError{Path: rel, Err: tools.ErrTooLarge, Msg: fmt.Sprintf(
				"is %s, over the %s a chat attachment may be; compress it or send a part",
				tools.FormatSize(fi.Size()), tools.FormatSize(o.MaxSendBytes))}
		}
		return tools.Result{
			Text:    fmt.Sprintf("%s (%s) will be attached to your answer.", rel, tools.FormatSize(fi.Size())),
			Summary: fmt.Sprintf("attach %s (%s)", rel, tools.FormatSize(fi.Size())),
			Files:   []string{rel},
		}, nil
	})
}
