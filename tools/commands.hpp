#pragma once
// The sluice subcommands. Each returns the process exit status; errors are thrown as
// sluice::Error and turned into a message and a status by main().
namespace sluice::cli {

int cmd_send(int argc, char** argv);
int cmd_recv(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_get(int argc, char** argv);
// Prints a sluice::Stats-like summary line for humans on stderr.
extern const char* const kSendHelp;
extern const char* const kRecvHelp;
extern const char* const kServeHelp;
extern const char* const kGetHelp;

} // namespace sluice::cli
