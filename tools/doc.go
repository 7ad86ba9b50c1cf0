// Package tools defines what a tool is ([Tool], [Result]), the sorted [Set]
// the agent offers to the model, and the channel [Workspace] every file
// operation goes through (an os.Root, so no path can leave it).
//
// tools knows nothing of agents, chat platforms or stores; the concrete tools
// live in sub-packages (tools/files, …).
package tools
