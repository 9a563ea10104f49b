#pragma once
// The subcommands of `gpumemshim`. Each takes its own arguments (argv[0] is the subcommand's name)
// and returns the process exit status.

namespace gms::tools {

inline constexpr int kExitUsage = 2;        // bad arguments or option values: nothing was started
inline constexpr int kExitCannotRun = 127;  // the command given to `run` could not be executed

int run_command(int argc, char** argv);
int doctor_command(int argc, char** argv);
int options_command(int argc, char** argv);
int report_command(int argc, char** argv);  // tools/report/report_cmd.cc

}  // namespace gms::tools
