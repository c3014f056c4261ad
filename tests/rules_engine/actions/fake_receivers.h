// Loopback receivers for notification tests: a minimal HTTP server that
// records POSTs and answers with scripted status codes, and a minimal SMTP
// server that records the mails it is given. Real sockets, so the sinks'
// libcurl code runs as in production.

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_ACTIONS_FAKE_RECEIVERS_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_ACTIONS_FAKE_RECEIVERS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace debugplane::testing {

// Accepts connections on 127.0.0.1 (a free port) on its own thread and
// hands each to `Serve`.
class LoopbackServer {
 public:
  virtual ~LoopbackServer() { Stop(); }

  int port() const { return port_; }

  void Stop() {
    if (stop_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) close(listen_fd_);
  }

 protected:
  void Listen() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listen_fd_, 16);
    socklen_t length = sizeof(address);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd fd{listen_fd_, POLLIN, 0};
        if (poll(&fd, 1, 50) <= 0) continue;
        const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0) continue;
        Serve(connection);
        close(connection);
      }
    });
  }

  // Reads one line (through "\n"); false on EOF or after 5 s.
  static bool ReadLine(int fd, std::string& line) {
    line.clear();
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    char c;
    while (absl::Now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      if (read(fd, &c, 1) != 1) return false;
      line.push_back(c);
      if (c == '\n') return true;
    }
    return false;
  }
  static void Write(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = write(fd, text.data() + done, text.size() - done);
      if (n <= 0) return;
      done += n;
    }
  }

  virtual void Serve(int connection) = 0;

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class FakeHttpReceiver : public LoopbackServer {
 public:
  struct Request {
    std::string request_line;
    std::vector<std::string> headers;
    std::string body;
  };

  FakeHttpReceiver() { Listen(); }
  ~FakeHttpReceiver() override { Stop(); }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port(), "/hook"); }

  // The next requests are answered with these statuses, then 200.
  void Script(std::vector<int> statuses) {
    absl::MutexLock lock(&mu_);
    script_.assign(statuses.begin(), statuses.end());
  }
  std::vector<Request> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  // Every answer's body from now on ("ok" until set).
  void SetAnswerBody(std::string body) {
    absl::MutexLock lock(&mu_);
    answer_body_ = std::move(body);
  }

 protected:
  void Serve(int connection) override {
    Request request;
    std::string line;
    if (!ReadLine(connection, request.request_line)) return;
    size_t length = 0;
    while (ReadLine(connection, line) && line != "\r\n") {
      request.headers.push_back(std::string(absl::StripTrailingAsciiWhitespace(line)));
      if (absl::StartsWithIgnoreCase(line, "content-length:")) {
        (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &length);
      }
    }
    request.body.resize(length);
    size_t got = 0;
    while (got < length) {
      const ssize_t n = read(connection, request.body.data() + got, length - got);
      if (n <= 0) break;
      got += n;
    }
    int status = 200;
    std::string body;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(request);
      if (!script_.empty()) {
        status = script_.front();
        script_.pop_front();
      }
      body = answer_body_;
    }
    Write(connection, absl::StrCat("HTTP/1.1 ", status, " X\r\nContent-Length: ", body.size(),
                                   "\r\nConnection: close\r\n\r\n", body));
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<int> script_ ABSL_GUARDED_BY(mu_);
  std::string answer_body_ ABSL_GUARDED_BY(mu_) = "ok";
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
};

class FakeSmtpReceiver : public LoopbackServer {
 public:
  struct Mail {
    std::string from;
    std::vector<std::string> recipients;
    std::string data;
  };

  FakeSmtpReceiver() { Listen(); }
  ~FakeSmtpReceiver() override { Stop(); }

  std::string url() const { return absl::StrCat("smtp://127.0.0.1:", port()); }
  // RCPT TO answers 550 (unknown recipient) while set.
  void RejectRecipients(bool reject) { reject_.store(reject); }
  std::vector<Mail> mails() const {
    absl::MutexLock lock(&mu_);
    return mails_;
  }

 protected:
  void Serve(int connection) override {
    Write(connection, "220 fake ESMTP\r\n");
    Mail mail;
    std::string line;
    while (ReadLine(connection, line)) {
      const std::string command = absl::AsciiStrToUpper(line.substr(0, 4));
      if (command == "EHLO" || command == "HELO") {
        Write(connection, "250 fake\r\n");
      } else if (command == "MAIL") {
        mail.from = std::string(absl::StripAsciiWhitespace(line.substr(10)));
        Write(connection, "250 ok\r\n");
      } else if (command == "RCPT") {
        if (reject_) {
          Write(connection, "550 no such user\r\n");
          continue;
        }
        mail.recipients.push_back(std::string(absl::StripAsciiWhitespace(line.substr(8))));
        Write(connection, "250 ok\r\n");
      } else if (command == "DATA") {
        Write(connection, "354 go on\r\n");
        while (ReadLine(connection, line) && line != ".\r\n") mail.data += line;
        {
          absl::MutexLock lock(&mu_);
          mails_.push_back(mail);
        }
        Write(connection, "250 queued\r\n");
      } else if (command == "QUIT") {
        Write(connection, "221 bye\r\n");
        return;
      } else {
        Write(connection, "250 ok\r\n");
      }
    }
  }

 private:
  std::atomic<bool> reject_{false};
  mutable absl::Mutex mu_;
  std::vector<Mail> mails_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_ACTIONS_FAKE_RECEIVERS_H_
