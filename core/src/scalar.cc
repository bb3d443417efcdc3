#include "backplane/core/scalar.h"

#include <sstream>

namespace backplane {

std::string Scalar::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.toBool() ? "True" : "False");
    case Scalar::Kind::Int: return os << s.toInt();
    case Scalar::Kind::Double: return os << s.toDouble();
  }
  return os;
}

}  // namespace backplane
