#include "server/api/common.h"
namespace t9::server::api {
void register_anthropic(httplib::Server&, ServerContext&) {}
}
