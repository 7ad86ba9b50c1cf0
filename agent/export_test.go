package agent

// OpenAttachment is openAttachment, for tests.
var OpenAttachment = openAttachment
