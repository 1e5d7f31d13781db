#include "server/api/common.h"
namespace t9::server::api {
void register_ollama(httplib::Server&, ServerContext&) {}
}
